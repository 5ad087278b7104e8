//! marker-writer: the protected writer (SPEC §5). It records what happened to exactly which
//! content, and verifies such records fail-closed. Its seven commands (`run`, `write`, `verify`,
//! `show`, `sync`, `keygen`, `trust`) are an [`Action`], parsed with their options into an
//! [`Invocation`]. This module is the entry and the routing; each command's work is in a
//! module of its own (`run`, `write`, `verify`, `show`, `sync`, `keygen`, `trust`).

mod keygen;
mod run;
mod show;
mod sync;
mod trust;
mod verify;
mod write;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::cli::defs::{self, Given, Scope};
use crate::cli::flags;
use crate::cli::flags::help;
use crate::cli::output::diagnostic;
use crate::error;
use crate::error::{Error, Result};
use crate::evidence::marker::{self};
use crate::evidence::payload;
use crate::evidence::payload::{CheckName, Payload, Run, Status};
use crate::evidence::signing;
use crate::evidence::subject::Limits;
use crate::evidence::subject::Subject;
use crate::evidence::subject::worktree::DEFAULT_MAX_FILE_SIZE;
use crate::exit::Code as ExitCode;
use crate::exit::Exit;
use crate::state::project::Project;
use crate::sys::digest;
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

/// `--help`: the options of every command, from the table.
fn help_text() -> String {
    let mut text = HELP.to_string();
    for flag in defs::of_binary(NAME) {
        text.push_str(&defs::entry(&flag.usage(), flag.help.unwrap_or("")));
    }
    text.push_str(&defs::entry("-h, --help", "this text"));
    text
}

/// marker-writer's commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
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
    pub(crate) fn parse(word: &str) -> Result<Action> {
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
pub(crate) struct Invocation {
    action: Action,
    options: Options,
}

impl Invocation {
    /// The command line after `marker-writer`; `None` for --help.
    pub(crate) fn parse(mut args: Vec<OsString>) -> Result<Option<Invocation>> {
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
    pub(crate) fn execute(self) -> Result<u8> {
        execute(self.action, self.options)
    }
}

/// Routes a command to its module, after what every marker command needs: the check, the
/// subject, its options checked together, and (for a writer) the key and a writable state.
fn execute(action: Action, options: Options) -> Result<u8> {
    if action == Action::Keygen {
        return keygen::keygen(options);
    }
    let project = Project::resolve(options.state_dir.as_deref(), None);
    if action == Action::Trust {
        return trust::trust(&project, options);
    }
    if action == Action::Sync {
        return sync::sync(&project, &options);
    }
    // A key that cannot be read stops a writer before it runs anything.
    let signer = if action.writes() {
        signing::sign_key(options.sign_key.as_deref())?
    } else {
        None
    };
    let (check, subject) = marked(action, &options)?;
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
        return run::run(
            &project,
            &check,
            &subject,
            None,
            limits,
            options,
            signer.as_ref(),
        );
    }
    let subject_id = subject_id(&project, &subject, limits)?;
    match action {
        Action::Run => run::run(
            &project,
            &check,
            &subject,
            Some(&subject_id),
            limits,
            options,
            signer.as_ref(),
        ),
        Action::Write => write::write(&project, &check, &subject_id, options, signer.as_ref()),
        Action::Verify => verify::verify(&project, &check, &subject_id, &options),
        _ if options.all => show::show_all(&project, &check, &subject_id, limits, &options),
        _ => show::show(&project, &check, &subject_id),
    }
}

/// The check a marker command is for (`--check`, needed), its subject (the worktree unless
/// `--subject` says otherwise), and `--note` within its bound.
fn marked(action: Action, options: &Options) -> Result<(CheckName, Subject)> {
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
    Ok((check, subject))
}

/// The id of the content a marker is for, as it is now.
fn subject_id(project: &Project, subject: &Subject, limits: Limits) -> Result<String> {
    Ok(match subject {
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
        _ => subject.id(project, None, limits)?,
    })
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

/// A new payload: `check` ended `status` for the content `subject_id`, unsigned.
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

/// How long publishing a note may take.
fn publish_deadline() -> time::Deadline {
    time::Deadline::after(Duration::from_secs(30))
}
