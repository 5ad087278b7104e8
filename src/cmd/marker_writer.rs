//! marker-writer: the protected writer (SPEC §5). It records what happened to exactly which
//! content, and verifies such records fail-closed. Its seven commands (`run`, `write`, `verify`,
//! `show`, `sync`, `keygen`, `trust`) are an [`Action`], parsed with their options into an
//! [`Invocation`].

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::cli::defs::{self, Given, Scope};
use crate::cli::flags;
use crate::cli::flags::{help, print, shell_quote};
use crate::cli::output::diagnostic;
use crate::error;
use crate::error::{Error, Result};
use crate::evidence::held;
use crate::evidence::marker::{self};
use crate::evidence::notes;
use crate::evidence::notes::MAX_FETCH;
use crate::evidence::notes::SyncOptions;
use crate::evidence::payload;
use crate::evidence::payload::{CheckName, Payload, Run, Status};
use crate::evidence::signing;
use crate::evidence::signing::SignKey;
use crate::evidence::signing::Trust;
use crate::evidence::snapshot;
use crate::evidence::subject;
use crate::evidence::subject::Limits;
use crate::evidence::subject::Subject;
use crate::evidence::subject::worktree::DEFAULT_MAX_FILE_SIZE;
use crate::exit::Code as ExitCode;
use crate::exit::Exit;
use crate::gate::held_check;
use crate::reach::confine;
use crate::reach::confine::Plan;
use crate::reach::confine::Unavailable;
use crate::state::project::Project;
use crate::state::wakes;
use crate::sys::digest;
use crate::sys::git;
use crate::sys::process::{self, Outcome};
use crate::sys::time;

const NAME: &str = "marker-writer";

const HELP: &str = "\
marker-writer: content-bound markers from a protected writer, verified fail-closed.

Usage:
  marker-writer run    --check NAME [--subject S] [--timeout SECS] [--snapshot [--keep-env NAME]...]
                       [--hold-from REF [--hold PATTERN]...] [--publish] -- CMD ARGS...
  marker-writer write  --check NAME --status STATUS [--subject S] [--note TEXT]
                       [--command CMD] [--publish]
  marker-writer verify --check NAME [--subject S] [--max-age DURATION] [--command CMD]
  marker-writer show   --check NAME [--subject S] [--all]
  marker-writer sync   [--remote NAME|URL] [--push] [--check NAME]... [--timeout SECS]
                       [--max-fetch SIZE]
  marker-writer keygen --out DIR
  marker-writer trust  KEYFILE [--global]

A marker records that a check (tests, lint, review...) ended with a status (passed, failed,
blocked, aborted) for exactly one content, named by its hash. It lives in the project's
protected state, outside the project (markers/NAME/ under $VIGIL_STATE_HOME, else
~/.local/state/vigil, projects/<name>-<hash>/): the payload KEY.json, then the empty gate file
KEY.ok, each written atomically. .vigil/markers/ is no longer read. Run it from a process the
agent cannot alter: a CI job, a git hook, a human; inside the agent's sandbox, where the state
home is read-only, run and write refuse at once.

run      runs CMD (its output passes through unchanged), records passed on exit 0, failed on
         another code, aborted on a signal or --timeout, and exits with the command's code
         (124 on a timeout, 128+N on signal N). In place, the worktree is hashed before and
         after, and a change between is recorded aborted: for writers the agent cannot reach
         (CI). With --snapshot, CMD runs in a private copy of exactly the hashed files, with a
         clean environment: for a writer on the agent's machine
write    records a status given by hand
verify   exits 0 only for a passed marker of exactly this content, younger than --max-age,
         local or published as a git note and synced (and with --command, written by that
         command); otherwise 1 with one line: missing, subject mismatch, malformed, status S,
         stale, bad signature, or command mismatch
show     prints the payload of the marker for this content; --all lists every marker for it,
         local and from notes, newest first, with the first reason each would be denied, and
         when none is for this content, which paths differ from the nearest published one
sync     fetches the notes published on a remote (refs/notes/vigil/*) into vigil's own
         repository in the protected state, merges them with those published here, and writes
         them out for the gates; --push also pushes them, merging and retrying when another
         writer pushed first. Nothing on the Stop path touches the network: only sync does
keygen   makes an Ed25519 key pair: DIR/vigil-marker.key (0600, never overwritten; keep it
         where the agent cannot read it) and DIR/vigil-marker.pub (safe to commit)
trust    trusts a public key for this project's markers (--global: for every project), in the
         protected state outside the project; keys inside the project are never trusted

Options:
";

/// The binary's work, from its command line to its exit code.
pub fn main() -> ExitCode {
    if flags::start(NAME) {
        return ExitCode::SUCCESS;
    }
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let done = Invocation::parse(args).and_then(|command| match command {
        Some(command) => command.execute(),
        None => help(&help_text()).map(Exit::code),
    });
    match done {
        Ok(exit) => ExitCode::from(exit),
        Err(err) => {
            diagnostic(NAME, &err.to_string());
            err.exit().into()
        }
    }
}

/// The options every command shares, and the rest.
#[derive(Default)]
struct Options {
    check: Option<CheckName>,
    checks: Vec<CheckName>,
    subject: Option<Subject>,
    status: Option<Status>,
    note: Option<String>,
    /// `write --command`, `verify --command`.
    bound_to: Option<String>,
    timeout: Option<Duration>,
    max_age: Option<Duration>,
    state_dir: Option<PathBuf>,
    sign_key: Option<PathBuf>,
    verify_key: Option<PathBuf>,
    out: Option<PathBuf>,
    command: Vec<OsString>,
    snapshot: bool,
    keep_env: Vec<String>,
    check_network: bool,
    check_write: Vec<PathBuf>,
    /// `run --hold-from REF`: the held paths restored from REF in the run's copy.
    hold_from: Option<String>,
    /// `run --hold PATTERN`: what to hold from REF (else its `.vigil-hold`).
    hold: Vec<String>,
    max_file_size: Option<u64>,
    max_fetch: Option<u64>,
    global: bool,
    key_file: Option<PathBuf>,
    publish: bool,
    all: bool,
    remote: Option<String>,
    push: bool,
}

/// marker-writer's commands.
/// `--help`: the options of every command, from the table.
fn help_text() -> String {
    let mut text = HELP.to_string();
    for flag in defs::of_binary(NAME) {
        text.push_str(&defs::entry(&flag.usage(), flag.help.unwrap_or("")));
    }
    text.push_str(&defs::entry("-h, --help", "this text"));
    text
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Run,
    Write,
    Verify,
    Show,
    Sync,
    Keygen,
    Trust,
}

impl Action {
    /// The command a word names.
    pub fn parse(word: &str) -> Result<Action> {
        Ok(match word {
            "run" => Action::Run,
            "write" => Action::Write,
            "verify" => Action::Verify,
            "show" => Action::Show,
            "sync" => Action::Sync,
            "keygen" => Action::Keygen,
            "trust" => Action::Trust,
            _ => {
                return Err(Error::usage(format!(
                    "unknown command {word:?}; use run, write, verify, show, sync, keygen or trust"
                )));
            }
        })
    }

    fn word(self) -> &'static str {
        match self {
            Action::Run => "run",
            Action::Write => "write",
            Action::Verify => "verify",
            Action::Show => "show",
            Action::Sync => "sync",
            Action::Keygen => "keygen",
            Action::Trust => "trust",
        }
    }

    /// Whether it writes a marker (and so signs, and refuses where the state is read-only).
    fn writes(self) -> bool {
        matches!(self, Action::Run | Action::Write)
    }
}

/// A command and its options, as given on marker-writer's command line.
pub struct Invocation {
    action: Action,
    options: Options,
}

impl Invocation {
    /// The command line after `marker-writer`; `None` for --help.
    pub fn parse(mut args: Vec<OsString>) -> Result<Option<Invocation>> {
        if args.is_empty() {
            return Err(Error::usage(
                "a command is needed: run, write, verify, show, sync, keygen or trust; see --help",
            ));
        }
        let word = args.remove(0);
        let word = word.to_str().unwrap_or("");
        if matches!(word, "-h" | "--help") {
            return Ok(None);
        }
        let action = Action::parse(word)?;
        Ok(parse(action, args)?.map(|options| Invocation { action, options }))
    }

    /// Does the command's work; its exit code.
    pub fn execute(self) -> Result<u8> {
        execute(self.action, self.options)
    }
}

fn execute(action: Action, options: Options) -> Result<u8> {
    if action == Action::Keygen {
        let out = options
            .out
            .ok_or_else(|| Error::usage("`keygen` needs --out DIR"))?;
        let (secret, public) = signing::keygen(&out)?;
        return print(
            format!(
                "marker-writer: secret key {} (keep it from the agent), public key {} (commit it, or trust it with `marker-writer trust`)\n",
                secret.display(),
                public.display()
            )
            .as_bytes(),
        )
        .map(Exit::code);
    }
    let project = Project::resolve(options.state_dir.as_deref(), None);
    if action == Action::Trust {
        let file = options.key_file.ok_or_else(|| {
            Error::usage("`trust` needs the public key file, e.g. vigil-marker.pub")
        })?;
        let (id, path) = signing::trust(&project, &file, options.global)?;
        let scope = if options.global {
            "every project"
        } else {
            "this project"
        };
        return print(
            format!(
                "marker-writer: key {id} is trusted for {scope}'s markers ({})\n",
                path.display()
            )
            .as_bytes(),
        )
        .map(Exit::code);
    }
    if action == Action::Sync {
        return sync(&project, &options);
    }
    // A key that cannot be read stops a writer before it runs anything.
    let signer = if action.writes() {
        signing::sign_key(options.sign_key.as_deref())?
    } else {
        None
    };
    let check = options
        .check
        .clone()
        .ok_or_else(|| Error::usage(format!("`{}` needs --check NAME", action.word())))?;
    let subject = match options.subject.clone() {
        Some(subject) => subject,
        None => Subject::Worktree,
    };
    if let Some(note) = &options.note
        && note.len() > payload::MAX_NOTE
    {
        return Err(Error::usage(format!(
            "--note is longer than {} bytes",
            payload::MAX_NOTE
        )));
    }
    let limits = Limits {
        max_file_size: options.max_file_size.unwrap_or(DEFAULT_MAX_FILE_SIZE),
        ..Limits::default()
    };
    if options.publish && subject != Subject::Worktree {
        return Err(Error::usage(
            "--publish needs --subject worktree: its id is a git tree id, the same wherever the content is",
        ));
    }
    if options.snapshot && subject != Subject::Worktree {
        return Err(Error::usage(
            "--snapshot copies the worktree, so it needs --subject worktree",
        ));
    }
    // Inside the agent's sandbox the protected state is read-only: refuse before running.
    if action.writes() {
        marker::writable_dir(&project, &check)?;
    }
    // The human holds the tests here (SPEC §11): a run of this worktree vouches only in a copy
    // that holds them, as the gate's check runs, so that the gate and verify count it.
    let mut options = options;
    if action == Action::Run
        && !options.snapshot
        && subject == Subject::Worktree
        && crate::state::hold::load(&project)?.is_some()
    {
        diagnostic(
            NAME,
            "the tests are held here (stop-gate hold show): the run is in a copy that holds them (--snapshot)",
        );
        options.snapshot = true;
    }
    if action == Action::Run && options.snapshot {
        return run(
            &project,
            &check,
            &subject,
            None,
            limits,
            options,
            signer.as_ref(),
        );
    }
    let subject_id = match subject {
        // Hashed as it streams: standard input may be larger than memory.
        Subject::Stdin => {
            let hex = digest::sha256_reader(std::io::stdin().lock()).map_err(|e| {
                Error::Io(format!(
                    "cannot read standard input: {}",
                    error::plain_io(&e)
                ))
            })?;
            format!("sha256:{hex}")
        }
        _ => subject.id(&project, None, limits)?,
    };
    match action {
        Action::Run => run(
            &project,
            &check,
            &subject,
            Some(&subject_id),
            limits,
            options,
            signer.as_ref(),
        ),
        Action::Write => {
            let status = options.status.ok_or_else(|| {
                Error::usage("`write` needs --status passed|failed|blocked|aborted")
            })?;
            let mut payload = payload(&check, status, &subject_id, None, options.note);
            payload.command = options.bound_to;
            if let Some(key) = &signer {
                signing::sign(key, &mut payload);
            }
            let (path, _) = marker::write(&project, &payload)?;
            if options.publish {
                notes::publish(&project, &payload, publish_deadline())?;
            }
            print(
                format!(
                    "marker-writer: {check} {} for {subject_id} in {}\n",
                    status.as_str(),
                    path.display()
                )
                .as_bytes(),
            )
            .map(Exit::code)
        }
        Action::Verify => {
            let max_age = options.max_age.unwrap_or(payload::DEFAULT_MAX_AGE);
            let trust = signing::trusted_keys(&project, options.verify_key.as_deref())?;
            let command = options.bound_to.as_deref();
            let verified =
                marker::verify_from(&project, &check, &subject_id, max_age, &trust, command);
            // Under the human's hold, what the gate counts (SPEC §11): a run that held it.
            if let (Ok((payload, _)), Some(hold)) = (&verified, crate::state::hold::load(&project)?)
                && let Err(why) = held::marker_held(payload, &hold)
            {
                diagnostic(
                    NAME,
                    &format!("{check}: not made under the human's hold on the tests ({why})"),
                );
                return Ok(Exit::Negative.code());
            }
            match verified {
                Ok((payload, source)) => print(
                    format!(
                        "{check}: passed for {subject_id}, written {} by {}@{}{}\n",
                        payload.created_at,
                        payload.writer.user,
                        payload.writer.host,
                        match source {
                            payload::Source::Local => "",
                            payload::Source::Notes => " (published as a note)",
                        }
                    )
                    .as_bytes(),
                )
                .map(Exit::code),
                Err(denial) => {
                    diagnostic(NAME, &format!("{check}: {}", denial.describe()));
                    Ok(Exit::Negative.code())
                }
            }
        }
        _ if options.all => show_all(&project, &check, &subject_id, limits, &options),
        _ => {
            let (payload_path, gate_path) = marker::paths(&project, &check, &subject_id);
            let payload = marker::read_payload(&payload_path).map_err(|denial| match denial {
                payload::Denial::Malformed(detail) if !payload_path.exists() => {
                    Error::input(format!("{check}: no marker for {subject_id} ({detail})"))
                }
                other => Error::input(format!("{check}: {}", other.describe())),
            })?;
            if !gate_path.is_file() {
                diagnostic(
                    NAME,
                    &format!(
                        "{check}: the payload has no gate file: it was never committed, and verify denies it"
                    ),
                );
            }
            let mut json = serde_json::to_vec_pretty(&payload).expect("a payload serializes");
            json.push(b'\n');
            print(&json).map(Exit::code)
        }
    }
}

fn parse(action: Action, args: Vec<OsString>) -> Result<Option<Options>> {
    let mut options = Options::default();
    // The flags of this command, as the table (`marker-writer.flags`) gives them.
    let mut args = defs::Args::new(args, Scope::of(NAME, action.word()));
    while let Some(given) = args.next()? {
        let (flag, value) = match given {
            Given::Help => return Ok(None),
            Given::Value(file) if action == Action::Trust && options.key_file.is_none() => {
                options.key_file = Some(PathBuf::from(file));
                continue;
            }
            Given::Value(first) if action == Action::Run => {
                options.command.push(first);
                options.command.extend(args.rest()?);
                continue;
            }
            Given::Value(value) => return Err(defs::unexpected(value)),
            Given::Flag(flag, value) => (flag, value.unwrap_or_default()),
        };
        let text = || flag.text(value.clone());
        match flag.name {
            "--check" if action == Action::Sync => options.checks.push(CheckName::parse(&text()?)?),
            "--check" => options.check = Some(CheckName::parse(&text()?)?),
            "--subject" => options.subject = Some(Subject::parse(&text()?)?),
            "--state-dir" => options.state_dir = Some(PathBuf::from(value)),
            "--sign-key" => options.sign_key = Some(PathBuf::from(value)),
            "--verify-key" => options.verify_key = Some(PathBuf::from(value)),
            "--out" => options.out = Some(PathBuf::from(value)),
            "--global" => options.global = true,
            "--snapshot" => options.snapshot = true,
            "--hold-from" => options.hold_from = Some(text()?),
            "--hold" => options.hold.push(text()?),
            "--check-network" => options.check_network = true,
            "--check-write" => options.check_write.push(flag.absolute(value)?),
            "--publish" => options.publish = true,
            "--all" => options.all = true,
            "--remote" => options.remote = Some(text()?),
            "--push" => options.push = true,
            "--max-fetch" => options.max_fetch = Some(flag.size(&text()?)?),
            "--keep-env" => options.keep_env.push(text()?),
            "--max-file-size" => options.max_file_size = Some(flag.size(&text()?)?),
            "--status" => options.status = Some(Status::parse(flag.choice(&text()?)?)?),
            "--command" => {
                let command = text()?;
                if shlex::split(&command).is_none_or(|words| words.is_empty()) {
                    return Err(Error::usage(format!(
                        "--command needs a command that splits into shell words, not {command:?}"
                    )));
                }
                options.bound_to = Some(command);
            }
            "--note" => options.note = Some(text()?),
            "--timeout" => options.timeout = Some(Duration::from_secs(flag.number(&text()?)?)),
            "--max-age" => options.max_age = Some(flag.duration(&text()?)?),
            _ => return Err(flag.unread()),
        }
    }
    if !options.hold.is_empty() && options.hold_from.is_none() {
        return Err(Error::usage(
            "--hold names what to hold from --hold-from REF; give --hold-from too",
        ));
    }
    // The held paths are restored in a copy, never in the worktree itself.
    if options.hold_from.is_some() {
        options.snapshot = true;
    }
    if !options.keep_env.is_empty() && !options.snapshot {
        return Err(Error::usage(
            "--keep-env keeps a variable through --snapshot's clean environment; an in-place run keeps them all",
        ));
    }
    if (options.check_network || !options.check_write.is_empty()) && !options.snapshot {
        return Err(Error::usage(
            "--check-network and --check-write loosen --snapshot's confinement; an in-place run is not confined",
        ));
    }
    if action == Action::Run && options.command.is_empty() {
        return Err(Error::usage(
            "`run` needs the command after --, e.g. marker-writer run --check tests -- cargo test",
        ));
    }
    Ok(Some(options))
}

/// `run`: in place (`subject_id` hashed before, and again after), or in a snapshot (`None`:
/// the id is of exactly the copy the command runs in).
fn run(
    project: &Project,
    check: &CheckName,
    subject: &Subject,
    subject_id: Option<&str>,
    limits: Limits,
    options: Options,
    signer: Option<&SignKey>,
) -> Result<u8> {
    let shown = options
        .command
        .iter()
        .map(|a| shell_quote(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ");
    let shown = if shown.chars().count() > payload::MAX_NOTE {
        format!(
            "{} …",
            shown
                .chars()
                .take(payload::MAX_NOTE - 2)
                .collect::<String>()
        )
    } else {
        shown
    };
    // CI holds too (SPEC §11): the held paths as REF has them, taken before anything runs.
    let ci_hold = match &options.hold_from {
        Some(rev) => Some(held::from_ref(project, rev, &options.hold)?),
        // A snapshot run on this machine holds what the human holds here, as the gate does.
        None if subject_id.is_none() => crate::state::hold::load(project)?
            .map(|hold| (hold, std::collections::HashMap::new(), "hold".to_string())),
        None => None,
    };
    let hold_dir = crate::state::hold::dir(project);
    let mut applied = None;
    let snapshot = match subject_id {
        Some(_) => None,
        None => {
            let snapshot = snapshot::take(project, limits)?;
            if let Some((hold, blobs, _)) = &ci_hold {
                let bytes_of = |file: &crate::state::hold::HeldFile| match blobs.get(&file.blob) {
                    Some(bytes) => Ok(bytes.clone()),
                    None => crate::state::hold::blob_in(&hold_dir, &file.blob),
                };
                let copies = crate::state::hold::env_dir(project);
                applied = Some(held::apply(
                    &held::top(project)?,
                    &project.dir,
                    snapshot.path(),
                    hold,
                    &bytes_of,
                    &|_| false,
                    blobs.is_empty().then_some(copies.as_path()),
                )?);
            }
            if !snapshot.protected {
                diagnostic(
                    NAME,
                    &format!(
                        "the state home cannot be written, so the snapshot is in {}, where a sandboxed agent can write",
                        snapshot.path().display()
                    ),
                );
            }
            Some(snapshot)
        }
    };
    let subject_id = match (&snapshot, subject_id) {
        (Some(snapshot), _) => snapshot.subject.clone(),
        (None, Some(id)) => id.to_string(),
        (None, None) => unreachable!("a run is in place or in a snapshot"),
    };
    // A snapshot run is confined (SPEC §9): the command is the agent's code. An in-place run
    // is for a writer out of the agent's reach (CI), and has the writer's own rights.
    let mut confined = None;
    // How it ran, when with the writer's own rights: said with the result.
    let mut unconfined = None;
    let plain = || {
        let mut cmd = Command::new(&options.command[0]);
        cmd.args(&options.command[1..]);
        cmd
    };
    let cache = applied
        .as_ref()
        .and_then(|_| held_check::check_cache(project).ok());
    let mut cmd = match &snapshot {
        Some(snapshot) => {
            let plan = Plan {
                read_only: applied
                    .as_ref()
                    .map(|a| a.read_only.clone())
                    .unwrap_or_default(),
                bound: applied
                    .as_ref()
                    .map(|a| a.bound.clone())
                    .unwrap_or_default(),
                // Under a hold, builds go to the check cache, as the gate's check's do.
                env: match (&applied, &cache) {
                    (Some(_), Some(cache)) => held_check::cache_variables(cache),
                    _ => Vec::new(),
                },
                work: snapshot.path().to_path_buf(),
                cwd: snapshot.cwd.clone(),
                writable: options
                    .check_write
                    .iter()
                    .cloned()
                    .chain(applied.as_ref().and(cache.clone()))
                    .collect(),
                network: options.check_network,
                hide: signing::sign_key_path(options.sign_key.as_deref())
                    .into_iter()
                    .collect(),
                project_state: project.state.clone(),
                clean_env: Some(options.keep_env.clone()),
                // The snapshot is removed whole; nothing of the project is made.
                ledger: None,
            };
            let made = confine::working_sandbox().and_then(|bwrap| {
                confine::command(&bwrap, &plan, &options.command[0], &options.command[1..])
            });
            match made {
                Ok((cmd, c)) => {
                    confined = Some(c);
                    cmd
                }
                Err(Unavailable::Project(why)) => {
                    return Err(Error::Io(format!(
                        "`{shown}` cannot be confined ({why}); no marker written"
                    )));
                }
                Err(Unavailable::Machine(why)) => {
                    unconfined = Some(format!("unconfined, with your rights: {why}"));
                    let mut cmd = plain();
                    process::clean_env(&mut cmd, &options.keep_env);
                    cmd.current_dir(&snapshot.cwd);
                    cmd
                }
            }
        }
        None => {
            unconfined = Some(
                "in place, unconfined, with your rights: for a writer the agent cannot reach, such as CI; a local writer uses --snapshot".to_string(),
            );
            // At the project, as the gate runs its check.
            let mut cmd = plain();
            cmd.current_dir(&project.dir);
            cmd
        }
    };
    // The key signs the marker; the command under test never sees where it is.
    cmd.env_remove("VIGIL_SIGN_KEY");
    if matches!(subject, Subject::Stdin) {
        cmd.stdin(Stdio::null());
    }
    let ran = match process::run_passthrough(cmd, options.timeout) {
        Ok(ran) => ran,
        // As a shell: 127 for a command that cannot be run at all; no marker is written.
        Err(e) => {
            diagnostic(
                NAME,
                &format!("cannot run `{shown}`: {}", error::plain_io(&e)),
            );
            return Ok(127);
        }
    };
    let confinement = match confined.as_mut().map(|c| c.started()) {
        Some(false) => {
            return Err(Error::Io(format!(
                "`{shown}` was not run: bubblewrap could not confine it here; no marker written"
            )));
        }
        Some(true) => payload::Confinement::Bubblewrap,
        None => payload::Confinement::None,
    };
    drop(confined);
    let isolation = if snapshot.is_some() {
        payload::Isolation::Snapshot
    } else {
        payload::Isolation::InPlace
    };
    drop(snapshot);
    let (mut status, code) = match ran.outcome {
        Outcome::Exited(0) => (Status::Passed, 0),
        Outcome::Exited(code) => (Status::Failed, code),
        Outcome::Signaled(signal) => (Status::Aborted, 128 + signal),
        Outcome::TimedOut => (Status::Aborted, 124),
    };
    // A pass in place vouches for the content it ran on; if that changed under it, nothing is
    // vouched. (A snapshot cannot change: the agent's edits land in the worktree.)
    let mut note = None;
    if isolation == payload::Isolation::InPlace
        && matches!(subject, Subject::Worktree)
        && subject.id(project, None, limits.renewed()).ok().as_deref() != Some(subject_id.as_str())
    {
        diagnostic(
            NAME,
            &format!("the worktree changed while `{shown}` ran; recording aborted"),
        );
        if status == Status::Passed {
            status = Status::Aborted;
        }
        note = Some("the worktree changed while the command ran".to_string());
    }
    let record = Run {
        command: shown,
        exit_code: code,
        duration_ms: u64::try_from(ran.duration.as_millis()).unwrap_or(u64::MAX),
        output_sha256: ran.output_sha256,
        isolation: Some(isolation),
        confinement: Some(confinement),
        hold: ci_hold.as_ref().map(|(hold, _, commit)| payload::HeldRun {
            from: commit.clone(),
            patterns: hold.patterns.iter().map(|p| p.pattern.clone()).collect(),
            files: hold.files.len() as u64,
            digest: held::digest(hold),
            left_out: applied
                .as_ref()
                .map(|a| a.left_out.iter().take(20).cloned().collect())
                .unwrap_or_default(),
        }),
    };
    let mut payload = payload(check, status, &subject_id, Some(record), note);
    if let Some(key) = signer {
        signing::sign(key, &mut payload);
    }
    let written = marker::write(project, &payload).and_then(|_| {
        if options.publish {
            notes::publish(project, &payload, publish_deadline())?;
        }
        Ok(())
    });
    match written {
        Ok(()) => {
            let how = unconfined
                .map(|how| format!(" (ran {how})"))
                .unwrap_or_default();
            diagnostic(
                NAME,
                &format!("{check} {} for {subject_id}{how}", status.as_str()),
            );
            Ok(u8::try_from(code.clamp(0, 255)).unwrap_or(1))
        }
        // The command passed but nothing vouches for it: that must not look like success.
        Err(e) if code == 0 => Err(e),
        Err(e) => {
            diagnostic(NAME, &e.to_string());
            Ok(u8::try_from(code.clamp(0, 255)).unwrap_or(1))
        }
    }
}

fn payload(
    check: &CheckName,
    status: Status,
    subject_id: &str,
    run: Option<Run>,
    note: Option<String>,
) -> Payload {
    Payload {
        schema: payload::SCHEMA.to_string(),
        check: check.to_string(),
        status,
        subject: subject_id.to_string(),
        created_at: time::now_rfc3339(),
        writer: payload::writer(),
        run,
        note,
        origin: payload::origin(),
        command: None,
        signature: None,
    }
}

/// What the notes say of the content `subject_id`, one verdict per check: each note signed by
/// a trusted key (an unsigned one vouches for nothing) for this check and this content, the
/// newest.
fn ci_verdicts(project: &Project, subject_id: &str) -> Vec<(String, String)> {
    let Ok(trust) = signing::trusted_keys(project, None) else {
        return Vec::new();
    };
    if trust.keys.is_empty() {
        return Vec::new();
    }
    let mut verdicts = Vec::new();
    for check in notes::written_checks(project) {
        let newest = notes::read(project, &check, subject_id)
            .into_iter()
            .flatten()
            .filter(|p| {
                p.check == check.as_str() && p.subject == subject_id && trust.check(p).is_ok()
            })
            .max_by(|a, b| a.created_at.cmp(&b.created_at));
        if let Some(payload) = newest {
            verdicts.push((check.to_string(), payload.status.as_str().to_string()));
        }
    }
    verdicts
}

/// `sync`: the notes of a remote in, merged with those published here, written out for the
/// gates; with `--push`, out again. One line says what it did.
fn sync(project: &Project, options: &Options) -> Result<u8> {
    let remote = options.remote.as_deref().unwrap_or("origin");
    let deadline = time::Deadline::after(options.timeout.unwrap_or(Duration::from_secs(30)));
    let url = notes::remote_url(project, remote, deadline)?;
    let max_fetch = options.max_fetch.unwrap_or(MAX_FETCH);
    // A remote given as a URL may carry its token: it is never said.
    let remote = notes::redact(remote);
    let sync_options = SyncOptions {
        push: options.push,
        max_fetch,
        checks: options.checks.clone(),
    };
    // The content checked out, and what CI had vouched for it before: a verdict the sync
    // brings wakes the project's commander (SPEC §10).
    let subject = Subject::Worktree.id(project, None, Limits::default()).ok();
    let before = subject
        .as_deref()
        .map(|id| ci_verdicts(project, id))
        .unwrap_or_default();
    let synced = notes::sync(project, &url, &sync_options, deadline)
        .map_err(|e| Error::Io(format!("sync with {remote}: {e}")))?;
    if let Some(id) = subject.as_deref() {
        for (check, status) in ci_verdicts(project, id) {
            if !before.contains(&(check.clone(), status.clone()))
                && let Err(e) = wakes::ci_verdict(&project.dir, &check, &status, id)
            {
                diagnostic(
                    NAME,
                    &format!("{e}; the commander is not woken for {check}"),
                );
            }
        }
    }
    for skipped in &synced.skipped {
        diagnostic(NAME, &format!("sync with {remote}: skipped {skipped}"));
    }
    let checks = if synced.checks.is_empty() {
        "no check has notes".to_string()
    } else {
        synced
            .checks
            .iter()
            .map(|(check, n)| format!("{check} ({n} content{})", if *n == 1 { "" } else { "s" }))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let pushed = if synced.pushed { ", pushed" } else { "" };
    print(format!("marker-writer: synced with {remote}{pushed}: {checks}\n").as_bytes())
        .map(Exit::code)
}

/// `show --all`: every marker for this content, local and from notes, newest first, each with
/// the first reason it would be denied; with none for it, what differs from the nearest content
/// that has one.
fn show_all(
    project: &Project,
    check: &CheckName,
    subject_id: &str,
    limits: Limits,
    options: &Options,
) -> Result<u8> {
    let trust = signing::trusted_keys(project, options.verify_key.as_deref())?;
    let max_age = options.max_age.unwrap_or(payload::DEFAULT_MAX_AGE);
    let mut found: Vec<(Payload, &str, String)> = Vec::new();
    let mut unreadable: Vec<String> = Vec::new();
    let (payload_path, gate_path) = marker::paths(project, check, subject_id);
    if gate_path.is_file() || payload_path.is_file() {
        match marker::read_payload(&payload_path) {
            Ok(payload) => {
                let verdict = verdict(
                    &payload,
                    check,
                    subject_id,
                    max_age,
                    &trust,
                    gate_path.is_file(),
                );
                found.push((payload, "local", verdict));
            }
            Err(denial) => unreadable.push(format!("  local  denied: {}\n", denial.describe())),
        }
    }
    for note in notes::read(project, check, subject_id) {
        match note {
            Ok(payload) => {
                let verdict = verdict(&payload, check, subject_id, max_age, &trust, true);
                found.push((payload, "notes", verdict));
            }
            Err(denial) => unreadable.push(format!("  notes  denied: {}\n", denial.describe())),
        }
    }
    found.sort_by(|a, b| b.0.created_at.cmp(&a.0.created_at));
    let mut out = format!("{check} for {subject_id}:\n");
    for (payload, source, verdict) in &found {
        let signed = match &payload.signature {
            Some(signature) => format!("signed by {}", signature.key_id),
            None => "unsigned".to_string(),
        };
        let from = payload
            .origin
            .as_ref()
            .and_then(|o| o.run_url.clone())
            .unwrap_or_else(|| format!("{}@{}", payload.writer.user, payload.writer.host));
        out.push_str(&format!(
            "  {}  {source:<5}  {:<7}  {signed}  {from}  {verdict}\n",
            payload.created_at,
            payload.status.as_str()
        ));
    }
    out.extend(unreadable.iter().map(String::as_str));
    if found.is_empty() {
        out.push_str("  no marker, local or from notes, is for this content\n");
        out.push_str(&nearest(project, check, limits));
    }
    print(out.as_bytes()).map(Exit::code)
}

fn verdict(
    payload: &Payload,
    check: &CheckName,
    subject_id: &str,
    max_age: Duration,
    trust: &Trust,
    committed: bool,
) -> String {
    if !committed {
        return "denied: malformed: the payload has no gate file".into();
    }
    match marker::judge(payload, check, subject_id, max_age, trust) {
        Ok(()) => "passes".into(),
        Err(denial) => format!("denied: {}", denial.describe()),
    }
}

/// Which paths differ between this content and the nearest content a marker of `check` was
/// published for (the newest 20 looked at; a published tree must be in this repository's
/// objects to be compared).
fn nearest(project: &Project, check: &CheckName, limits: Limits) -> String {
    let mut published = notes::published(project, check);
    published.sort_by_key(|(_, payloads)| {
        std::cmp::Reverse(payloads.iter().map(|p| p.created_at.clone()).max())
    });
    published.truncate(20);
    if published.is_empty() {
        return "  nothing is published for this check: run `marker-writer sync` to fetch what CI published\n".into();
    }
    let here = match subject::worktree_listing(project, limits) {
        Ok(here) => here,
        Err(e) => return format!("  cannot list this content: {e}\n"),
    };
    let here: std::collections::BTreeMap<String, String> = here.into_iter().collect();
    let mut best: Option<(String, Vec<String>)> = None;
    for (subject, _) in &published {
        let Some(tree) = notes::object_id(subject) else {
            continue;
        };
        let Ok(listed) = git::git(
            &project.dir,
            // Informs only; and never fetches a missing tree from a promisor remote the
            // project's config names (that runs its upload-pack).
            &[
                "-c",
                "protocol.allow=never",
                "ls-tree",
                "-r",
                "-z",
                "--full-tree",
                tree,
            ],
            &[("GIT_NO_LAZY_FETCH", std::ffi::OsStr::new("1"))],
            Duration::from_secs(10),
        ) else {
            continue;
        };
        let there: std::collections::BTreeMap<String, String> = listed
            .split('\0')
            .filter_map(|entry| {
                let (meta, path) = entry.split_once('\t')?;
                let id = meta.split(' ').nth(2)?;
                Some((path.to_string(), id.to_string()))
            })
            .collect();
        let mut differ = Vec::new();
        for (path, id) in &here {
            match there.get(path) {
                None => differ.push(format!("{path} (only here)")),
                Some(other) if other != id => differ.push(format!("{path} (changed)")),
                Some(_) => {}
            }
        }
        for path in there.keys().filter(|p| !here.contains_key(*p)) {
            differ.push(format!("{path} (only there)"));
        }
        if best.as_ref().is_none_or(|(_, d)| differ.len() < d.len()) {
            best = Some((subject.clone(), differ));
        }
    }
    match best {
        None => format!(
            "  none of the {} published contents is in this repository's objects: `git fetch` the commits CI tested to compare\n",
            published.len()
        ),
        Some((subject, differ)) => {
            let shown: Vec<&str> = differ.iter().take(10).map(String::as_str).collect();
            let more = differ.len().saturating_sub(shown.len());
            format!(
                "  nearest published: {subject}, where {} {}: {}{}\n",
                differ.len(),
                if differ.len() == 1 {
                    "path differs"
                } else {
                    "paths differ"
                },
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            )
        }
    }
}

/// How long publishing a note may take.
fn publish_deadline() -> time::Deadline {
    time::Deadline::after(Duration::from_secs(30))
}
