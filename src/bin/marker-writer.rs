//! marker-writer: the protected writer (SPEC §5). It records what happened to exactly which
//! content, and verifies such records fail-closed.

#![no_main]

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use std::time::Duration;
use vigil::exit::Code as ExitCode;

use lexopt::prelude::*;
use vigil::cli::{help, number, print, shell_quote, string_value};
use vigil::marker::{self, CheckName, Payload, Run, Status};
use vigil::output::diagnostic;
use vigil::process::{self, Outcome};
use vigil::state::Project;
use vigil::subject::Subject;
use vigil::{Error, Exit, Result, time};

const NAME: &str = "marker-writer";

const HELP: &str = "\
marker-writer: content-bound markers from a protected writer, verified fail-closed.

Usage:
  marker-writer run    --check NAME [--subject S] [--timeout SECS] [--snapshot [--keep-env NAME]...]
                       -- CMD ARGS...
  marker-writer write  --check NAME --status STATUS [--subject S] [--note TEXT]
  marker-writer verify --check NAME [--subject S] [--max-age DURATION]
  marker-writer show   --check NAME [--subject S]
  marker-writer keygen --out DIR
  marker-writer trust  KEYFILE [--global]

A marker records that a check (tests, lint, review...) ended with a status (passed, failed,
blocked, aborted) for exactly one content, named by its hash. It lives in
.vigil/markers/NAME/: the payload KEY.json, then the empty gate file KEY.ok, each written
atomically. Run it from a process the agent cannot alter: a CI job, a git hook, a human.

run      runs CMD (its output passes through unchanged), records passed on exit 0, failed on
         another code, aborted on a signal or --timeout, and exits with the command's code
         (124 on a timeout, 128+N on signal N). In place, the worktree is hashed before and
         after, and a change between is recorded aborted: for writers the agent cannot reach
         (CI). With --snapshot, CMD runs in a private copy of exactly the hashed files, with a
         clean environment: for a writer on the agent's machine
write    records a status given by hand
verify   exits 0 only for a passed marker of exactly this content, younger than --max-age;
         otherwise 1 with one line: missing, subject mismatch, malformed, status S, or stale
show     prints the payload of the marker for this content
keygen   makes an Ed25519 key pair: DIR/vigil-marker.key (0600, never overwritten; keep it
         where the agent cannot read it) and DIR/vigil-marker.pub (safe to commit)
trust    trusts a public key for this project's markers (--global: for every project), in the
         protected state outside the project; keys inside the project are never trusted

Options:
  --check NAME         the check: 1 to 64 of A-Z a-z 0-9 . _ -
  --subject S          worktree (default, in a git repository): the tree of the working tree,
                       untracked non-ignored files included; file:PATH: the file's sha256;
                       stdin: the sha256 of standard input
  --status STATUS      write: passed, failed, blocked or aborted
  --note TEXT          write: a note kept in the payload
  --timeout SECS       run: kill the command's whole process group after SECS
  --snapshot           run: run CMD in a private copy of exactly the hashed content (under the
                       state home), with only PATH HOME USER LOGNAME SHELL TERM LANG LC_* TZ
                       TMPDIR of the environment; the payload records isolation: snapshot
  --keep-env NAME      run --snapshot, repeatable: also keep this variable
  --max-file-size SIZE worktree: a larger file denies at once (default 1G; bytes, or K M G T)
  --global             trust: for every project, not only this one
  --max-age DURATION   verify: how old a marker may be (default 24h; 45s, 30m, 24h, 7d)
  --sign-key FILE      run, write: sign the payload with this secret key (or $VIGIL_SIGN_KEY)
  --verify-key FILE    verify: markers must be signed by this key (or $VIGIL_VERIFY_KEY), and
                       only by it; without it, by a key given to `marker-writer trust`; with
                       no trusted key, unsigned markers count; with one, an unsigned or
                       altered marker is `bad signature`
  --out DIR            keygen: where the key pair goes
  --state-dir DIR      where state lives (default <project>/.vigil, or $VIGIL_STATE_DIR)
  -h, --help           this text
";

vigil::entry!(real_main);

fn real_main() -> ExitCode {
    if vigil::cli::start(NAME) {
        return ExitCode::SUCCESS;
    }
    match run_main() {
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
    subject: Option<Subject>,
    status: Option<Status>,
    note: Option<String>,
    timeout: Option<Duration>,
    max_age: Option<Duration>,
    state_dir: Option<PathBuf>,
    sign_key: Option<PathBuf>,
    verify_key: Option<PathBuf>,
    out: Option<PathBuf>,
    command: Vec<OsString>,
    snapshot: bool,
    keep_env: Vec<String>,
    max_file_size: Option<u64>,
    global: bool,
    key_file: Option<PathBuf>,
}

fn run_main() -> Result<u8> {
    let mut args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.is_empty() {
        return Err(Error::usage(
            "a command is needed: run, write, verify, show, keygen or trust; see --help",
        ));
    }
    let action = args.remove(0);
    let action = action.to_str().unwrap_or("");
    if matches!(action, "-h" | "--help") {
        return help(HELP).map(Exit::code);
    }
    if !matches!(
        action,
        "run" | "write" | "verify" | "show" | "keygen" | "trust"
    ) {
        return Err(Error::usage(format!(
            "unknown command {action:?}; use run, write, verify, show, keygen or trust"
        )));
    }
    let Some(options) = parse(action, args)? else {
        return help(HELP).map(Exit::code);
    };
    if action == "keygen" {
        let out = options
            .out
            .ok_or_else(|| Error::usage("`keygen` needs --out DIR"))?;
        let (secret, public) = vigil::signing::keygen(&out)?;
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
    if action == "trust" {
        let file = options.key_file.ok_or_else(|| {
            Error::usage("`trust` needs the public key file, e.g. vigil-marker.pub")
        })?;
        let (id, path) = vigil::signing::trust(&project, &file, options.global)?;
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
    // A key that cannot be read stops a writer before it runs anything.
    let signer = if matches!(action, "run" | "write") {
        vigil::signing::sign_key(options.sign_key.as_deref())?
    } else {
        None
    };
    let check = options
        .check
        .clone()
        .ok_or_else(|| Error::usage(format!("`{action}` needs --check NAME")))?;
    let subject = match options.subject.clone() {
        Some(subject) => subject,
        None => Subject::Worktree,
    };
    if let Some(note) = &options.note
        && note.len() > marker::MAX_NOTE
    {
        return Err(Error::usage(format!(
            "--note is longer than {} bytes",
            marker::MAX_NOTE
        )));
    }
    let limits = vigil::subject::Limits {
        max_file_size: options
            .max_file_size
            .unwrap_or(vigil::subject::worktree::DEFAULT_MAX_FILE_SIZE),
        ..vigil::subject::Limits::default()
    };
    if options.snapshot && subject != Subject::Worktree {
        return Err(Error::usage(
            "--snapshot copies the worktree, so it needs --subject worktree",
        ));
    }
    if action == "run" && options.snapshot {
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
            let hex = vigil::subject::sha256_reader(std::io::stdin().lock()).map_err(|e| {
                Error::Io(format!(
                    "cannot read standard input: {}",
                    vigil::error::plain_io(&e)
                ))
            })?;
            format!("sha256:{hex}")
        }
        _ => subject.id(&project, None, limits)?,
    };
    match action {
        "run" => run(
            &project,
            &check,
            &subject,
            Some(&subject_id),
            limits,
            options,
            signer.as_ref(),
        ),
        "write" => {
            let status = options.status.ok_or_else(|| {
                Error::usage("`write` needs --status passed|failed|blocked|aborted")
            })?;
            let mut payload = payload(&check, status, &subject_id, None, options.note);
            if let Some(key) = &signer {
                vigil::signing::sign(key, &mut payload);
            }
            let (path, _) = marker::write(&project, &payload)?;
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
        "verify" => {
            let max_age = options.max_age.unwrap_or(marker::DEFAULT_MAX_AGE);
            let trust = vigil::signing::trusted_keys(&project, options.verify_key.as_deref())?;
            match marker::verify(&project, &check, &subject_id, max_age, &trust) {
                Ok(payload) => print(
                    format!(
                        "{check}: passed for {subject_id}, written {} by {}@{}\n",
                        payload.created_at, payload.writer.user, payload.writer.host
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
        _ => {
            let (payload_path, gate_path) = marker::paths(&project, &check, &subject_id);
            let payload = marker::read_payload(&payload_path).map_err(|denial| match denial {
                marker::Denial::Malformed(detail) if !payload_path.exists() => {
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

fn parse(action: &str, args: Vec<OsString>) -> Result<Option<Options>> {
    let mut options = Options::default();
    let mut parser = lexopt::Parser::from_args(args);
    while let Some(arg) = parser.next()? {
        match arg {
            Long("check") => {
                options.check = Some(CheckName::parse(&string_value(&mut parser, "--check")?)?)
            }
            Long("subject") => {
                options.subject = Some(Subject::parse(&string_value(&mut parser, "--subject")?)?)
            }
            Long("state-dir") => options.state_dir = Some(PathBuf::from(parser.value()?)),
            Long("sign-key") if matches!(action, "run" | "write") => {
                options.sign_key = Some(PathBuf::from(parser.value()?))
            }
            Long("verify-key") if action == "verify" => {
                options.verify_key = Some(PathBuf::from(parser.value()?))
            }
            Long("out") if action == "keygen" => options.out = Some(PathBuf::from(parser.value()?)),
            Long("global") if action == "trust" => options.global = true,
            Value(file) if action == "trust" && options.key_file.is_none() => {
                options.key_file = Some(PathBuf::from(file))
            }
            Long("snapshot") if action == "run" => options.snapshot = true,
            Long("keep-env") if action == "run" => options
                .keep_env
                .push(string_value(&mut parser, "--keep-env")?),
            Long("max-file-size") if action != "keygen" && action != "trust" => {
                options.max_file_size = Some(vigil::cli::size(&string_value(
                    &mut parser,
                    "--max-file-size",
                )?)?)
            }
            Long("status") if action == "write" => {
                options.status = Some(Status::parse(&string_value(&mut parser, "--status")?)?)
            }
            Long("note") if action == "write" => {
                options.note = Some(string_value(&mut parser, "--note")?)
            }
            Long("timeout") if action == "run" => {
                options.timeout = Some(Duration::from_secs(number(
                    &mut parser,
                    "--timeout",
                    1,
                    7 * 86_400,
                )?))
            }
            Long("max-age") if action == "verify" => {
                options.max_age = Some(time::parse_duration(&string_value(
                    &mut parser,
                    "--max-age",
                )?)?)
            }
            Short('h') | Long("help") => return Ok(None),
            Value(first) if action == "run" => {
                options.command.push(first);
                options.command.extend(parser.raw_args()?);
            }
            _ => return Err(arg.unexpected().into()),
        }
    }
    if !options.keep_env.is_empty() && !options.snapshot {
        return Err(Error::usage(
            "--keep-env keeps a variable through --snapshot's clean environment; an in-place run keeps them all",
        ));
    }
    if action == "run" && options.command.is_empty() {
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
    limits: vigil::subject::Limits,
    options: Options,
    signer: Option<&vigil::signing::SignKey>,
) -> Result<u8> {
    let shown = options
        .command
        .iter()
        .map(|a| shell_quote(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ");
    let shown = if shown.chars().count() > marker::MAX_NOTE {
        format!(
            "{} …",
            shown.chars().take(marker::MAX_NOTE - 2).collect::<String>()
        )
    } else {
        shown
    };
    let snapshot = match subject_id {
        Some(_) => None,
        None => {
            let snapshot = vigil::snapshot::take(project, limits)?;
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
    let mut cmd = Command::new(&options.command[0]);
    cmd.args(&options.command[1..]);
    // The key signs the marker; the command under test never sees where it is.
    cmd.env_remove("VIGIL_SIGN_KEY");
    if let Some(snapshot) = &snapshot {
        vigil::snapshot::clean_env(&mut cmd, &options.keep_env);
        cmd.current_dir(&snapshot.cwd);
    }
    if matches!(subject, Subject::Stdin) {
        cmd.stdin(Stdio::null());
    }
    let ran = match process::run_passthrough(cmd, options.timeout) {
        Ok(ran) => ran,
        // As a shell: 127 for a command that cannot be run at all; no marker is written.
        Err(e) => {
            diagnostic(
                NAME,
                &format!("cannot run `{shown}`: {}", vigil::error::plain_io(&e)),
            );
            return Ok(127);
        }
    };
    let isolation = if snapshot.is_some() {
        marker::Isolation::Snapshot
    } else {
        marker::Isolation::InPlace
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
    if isolation == marker::Isolation::InPlace
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
    };
    let mut payload = payload(check, status, &subject_id, Some(record), note);
    if let Some(key) = signer {
        vigil::signing::sign(key, &mut payload);
    }
    match marker::write(project, &payload) {
        Ok(_) => {
            diagnostic(
                NAME,
                &format!("{check} {} for {subject_id}", status.as_str()),
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
        schema: marker::SCHEMA.to_string(),
        check: check.to_string(),
        status,
        subject: subject_id.to_string(),
        created_at: time::now_rfc3339(),
        writer: marker::writer(),
        run,
        note,
        signature: None,
    }
}
