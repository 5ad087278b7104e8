//! `marker-writer run`: runs a command on exactly the hashed content, in place (for a writer
//! the agent cannot reach) or confined in a snapshot (for one on the agent's machine), under the
//! hold when there is one, and records how it ended.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::cli::flags::shell_quote;
use crate::cli::output::diagnostic;
use crate::error;
use crate::error::{Error, Result};
use crate::evidence::held::{self, Applied};
use crate::evidence::marker;
use crate::evidence::notes;
use crate::evidence::payload;
use crate::evidence::payload::{CheckName, Payload, Run, Status};
use crate::evidence::signing;
use crate::evidence::signing::SignKey;
use crate::evidence::snapshot::{self, Snapshot};
use crate::evidence::subject::Limits;
use crate::evidence::subject::Subject;
use crate::gate::held_check;
use crate::reach::confine::{self, Confined, Plan, Unavailable};
use crate::state::hold::{HeldFile, Hold};
use crate::state::project::Project;
use crate::sys::process::{self, Outcome};

use super::{NAME, Options, publish_deadline};

/// What a run holds: the hold, the bytes of its files as REF has them (none for the human's
/// hold here, whose blobs are in the protected state), and where it is from (REF's commit, or
/// `hold`).
type Held = (Hold, HashMap<String, Vec<u8>>, String);

/// `run`: in place (`subject_id` hashed before, and again after), or in a snapshot (`None`:
/// the id is of exactly the copy the command runs in).
pub(super) fn run(
    project: &Project,
    check: &CheckName,
    subject: &Subject,
    subject_id: Option<&str>,
    limits: Limits,
    options: Options,
    signer: Option<&SignKey>,
) -> Result<u8> {
    let shown = shown(&options.command);
    // CI holds too (SPEC §11): the held paths as REF has them, taken before anything runs.
    let ci_hold = held_for(project, subject_id, &options)?;
    let hold_dir = crate::state::hold::dir(project);
    let (snapshot, applied) = match subject_id {
        Some(_) => (None, None),
        None => {
            let (snapshot, applied) = copy(project, limits, ci_hold.as_ref(), &hold_dir)?;
            (Some(snapshot), applied)
        }
    };
    let subject_id = match (&snapshot, subject_id) {
        (Some(snapshot), _) => snapshot.subject.clone(),
        (None, Some(id)) => id.to_string(),
        (None, None) => unreachable!("a run is in place or in a snapshot"),
    };
    let (mut cmd, mut confined, unconfined) = command(
        project,
        snapshot.as_ref(),
        applied.as_ref(),
        &options,
        &shown,
    )?;
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
    let (mut status, code) = status_of(ran.outcome);
    // A pass in place vouches for the content it ran on; if that changed under it, nothing is
    // vouched. (A snapshot cannot change: the agent's edits land in the worktree.)
    let mut note = None;
    if isolation == payload::Isolation::InPlace && matches!(subject, Subject::Worktree) {
        // What the worktree holds now: the same content, other content, or not known (an I/O
        // error is no change, and is said as itself: issue 44).
        let why = match subject.id(project, None, limits.renewed()) {
            Ok(now) if now == subject_id => None,
            Ok(_) => Some((
                format!("the worktree changed while `{shown}` ran; recording aborted"),
                "the worktree changed while the command ran".to_string(),
            )),
            Err(e) => Some((
                format!(
                    "the worktree could not be read again after `{shown}` ran ({e}); recording aborted"
                ),
                "the worktree could not be read again after the command ran".to_string(),
            )),
        };
        if let Some((line, recorded)) = why {
            diagnostic(NAME, &line);
            if status == Status::Passed {
                status = Status::Aborted;
            }
            note = Some(recorded);
        }
    }
    let record = Run {
        command: shown,
        exit_code: code,
        duration_ms: u64::try_from(ran.duration.as_millis()).unwrap_or(u64::MAX),
        output_sha256: ran.output_sha256,
        isolation: Some(isolation),
        confinement: Some(confinement),
        hold: held_run(ci_hold.as_ref(), applied.as_ref()),
    };
    let mut payload = super::payload(check, status, &subject_id, Some(record), note);
    if let Some(key) = signer {
        signing::sign(key, &mut payload);
    }
    let written = write_marker(project, &payload, options.publish);
    told(written, check, &subject_id, status, code, unconfined)
}

/// How the command ended, as the status recorded and the exit code (124 on a timeout, 128+N
/// on signal N).
fn status_of(outcome: Outcome) -> (Status, i32) {
    match outcome {
        Outcome::Exited(0) => (Status::Passed, 0),
        Outcome::Exited(code) => (Status::Failed, code),
        Outcome::Signaled(signal) => (Status::Aborted, 128 + signal),
        Outcome::TimedOut => (Status::Aborted, 124),
    }
}

/// Writes the marker, and with `--publish` publishes it as a note.
fn write_marker(project: &Project, payload: &Payload, publish: bool) -> Result<()> {
    marker::write(project, payload).and_then(|_| {
        if publish {
            notes::publish(project, payload, publish_deadline())?;
        }
        Ok(())
    })
}

/// Says what was recorded (and how the command ran, when with the writer's own rights), and
/// exits as the command did; a marker that could not be written is said, and is an error when
/// the command passed.
fn told(
    written: Result<()>,
    check: &CheckName,
    subject_id: &str,
    status: Status,
    code: i32,
    unconfined: Option<String>,
) -> Result<u8> {
    match written {
        Ok(()) => {
            let how = unconfined
                .map(|how| format!(" (ran {how})"))
                .unwrap_or_default();
            diagnostic(
                NAME,
                &format!("{check} {} for {subject_id}{how}", status.as_str()),
            );
            // A command that passed on content no one can vouch for (the worktree changed, or
            // could not be read again) is no success: CI must not go green on it.
            if code == 0 && status != Status::Passed {
                return Ok(1);
            }
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

/// The command as a shell would read it, cut to what a payload's note holds.
fn shown(command: &[OsString]) -> String {
    let shown = command
        .iter()
        .map(|a| shell_quote(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ");
    if shown.chars().count() > payload::MAX_NOTE {
        format!(
            "{} …",
            shown
                .chars()
                .take(payload::MAX_NOTE - 2)
                .collect::<String>()
        )
    } else {
        shown
    }
}

/// What the run holds: REF's held paths with `--hold-from REF`; else, for a snapshot run
/// (`subject_id` `None`), the human's hold here, if any.
fn held_for(
    project: &Project,
    subject_id: Option<&str>,
    options: &Options,
) -> Result<Option<Held>> {
    Ok(match &options.hold_from {
        Some(rev) => Some(held::from_ref(project, rev, &options.hold)?),
        // A snapshot run on this machine holds what the human holds here, as the gate does.
        None if subject_id.is_none() => crate::state::hold::load(project)?
            .map(|hold| (hold, std::collections::HashMap::new(), "hold".to_string())),
        None => None,
    })
}

/// The snapshot the command runs in, with every held path made as held (`hold_dir` has the
/// human's blobs); a snapshot outside the protected state is said.
fn copy(
    project: &Project,
    limits: Limits,
    ci_hold: Option<&Held>,
    hold_dir: &Path,
) -> Result<(Snapshot, Option<Applied>)> {
    let mut applied = None;
    let snapshot = snapshot::take(project, limits)?;
    if let Some((hold, blobs, _)) = ci_hold {
        let bytes_of = |file: &HeldFile| match blobs.get(&file.blob) {
            Some(bytes) => Ok(bytes.clone()),
            None => crate::state::hold::blob_in(hold_dir, &file.blob),
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
    Ok((snapshot, applied))
}

/// The command to run, with what confines it (`None` when nothing does) and, when it runs with
/// the writer's own rights, how (said with the result). A snapshot run is confined (SPEC §9):
/// the command is the agent's code. An in-place run is for a writer out of the agent's reach
/// (CI), and has the writer's own rights.
fn command(
    project: &Project,
    snapshot: Option<&Snapshot>,
    applied: Option<&Applied>,
    options: &Options,
    shown: &str,
) -> Result<(Command, Option<Confined>, Option<String>)> {
    let plain = || {
        let mut cmd = Command::new(&options.command[0]);
        cmd.args(&options.command[1..]);
        cmd
    };
    let cache = applied.and_then(|_| held_check::check_cache(project).ok());
    let Some(snapshot) = snapshot else {
        let unconfined =
            "in place, unconfined, with your rights: for a writer the agent cannot reach, such as CI; a local writer uses --snapshot".to_string();
        // At the project, as the gate runs its check.
        let mut cmd = plain();
        cmd.current_dir(&project.dir);
        return Ok((cmd, None, Some(unconfined)));
    };
    let plan = plan(project, snapshot, applied, cache, options);
    let made = confine::working_sandbox().and_then(|bwrap| {
        confine::command(&bwrap, &plan, &options.command[0], &options.command[1..])
    });
    match made {
        Ok((cmd, confined)) => Ok((cmd, Some(confined), None)),
        Err(Unavailable::Project(why)) => Err(Error::Io(format!(
            "`{shown}` cannot be confined ({why}); no marker written"
        ))),
        Err(Unavailable::Machine(why)) => {
            let unconfined = format!("unconfined, with your rights: {why}");
            let mut cmd = plain();
            process::clean_env(&mut cmd, &options.keep_env);
            cmd.current_dir(&snapshot.cwd);
            Ok((cmd, None, Some(unconfined)))
        }
    }
}

/// What the sandbox of a snapshot run is given: the held paths read-only, the declared
/// environment bound, the check cache (`cache`, under a hold), the options' loosenings, the key
/// hidden.
fn plan(
    project: &Project,
    snapshot: &Snapshot,
    applied: Option<&Applied>,
    cache: Option<std::path::PathBuf>,
    options: &Options,
) -> Plan {
    Plan {
        read_only: applied.map(|a| a.read_only.clone()).unwrap_or_default(),
        bound: applied.map(|a| a.bound.clone()).unwrap_or_default(),
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
            .chain(applied.and(cache))
            .collect(),
        network: options.check_network,
        hide: signing::sign_key_path(options.sign_key.as_deref())
            .into_iter()
            .collect(),
        project_state: project.state.clone(),
        clean_env: Some(options.keep_env.clone()),
        // The snapshot is removed whole; nothing of the project is made.
        ledger: None,
        in_place: false,
    }
}

/// What the payload says of the hold a run was under.
fn held_run(ci_hold: Option<&Held>, applied: Option<&Applied>) -> Option<payload::HeldRun> {
    ci_hold.map(|(hold, _, commit)| payload::HeldRun {
        from: commit.clone(),
        patterns: hold.patterns.iter().map(|p| p.pattern.clone()).collect(),
        files: hold.files.len() as u64,
        digest: held::digest(hold),
        left_out: applied
            .map(|a| a.left_out.iter().take(20).cloned().collect())
            .unwrap_or_default(),
    })
}
