//! Markers (SPEC §5): a payload `<key>.json` recording what happened, then an empty gate file
//! `<key>.ok`, in `.vigil/markers/<check>/`, where `<key>` is the subject with `:` as `-`.
//! Verification fails closed: anything it cannot read, parse or match denies.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error;
use crate::error::{Error, Result};
use crate::evidence::notes;
use crate::evidence::payload::{
    CLOCK_SKEW, CheckName, Denial, Isolation, MAX_PAYLOAD, Payload, SCHEMAS, Source, Status,
    same_command,
};
use crate::evidence::signing::Trust;
use crate::evidence::subject;
use crate::state::project::Project;
use crate::sys::atomic;
use crate::sys::files;
use crate::sys::time;
use crate::verdict::defang;

/// The payload records `command`, when one is required, from a run whose environment could
/// not steer it: a snapshot's (a clean environment in a private copy), or any run of a writer
/// whose key a human trusted (CI's). The words of a run in place do not say what ran: `PATH`
/// or a runner's option variable (`PYTEST_ADDOPTS`) in the writer's environment changes it
/// and leaves them as they were (issue 43).
fn bound(
    payload: &Payload,
    command: Option<&str>,
    trust: &Trust,
) -> std::result::Result<(), Denial> {
    let Some(wanted) = command else {
        return Ok(());
    };
    let snapshot = payload
        .run
        .as_ref()
        .is_some_and(|run| run.isolation == Some(Isolation::Snapshot));
    match payload.command() {
        Some(recorded) if !same_command(recorded, wanted) => Err(Denial::CommandMismatch(format!(
            "the marker was written by `{}`, not `{wanted}`",
            defang::field_max(recorded, 200)
        ))),
        None => Err(Denial::CommandMismatch(format!(
            "the marker records no command, and `{wanted}` is required"
        ))),
        Some(_) if !snapshot && trust.keys.is_empty() => Err(Denial::CommandMismatch(format!(
            "the marker records `{wanted}` from a run in place, whose environment could have steered it (PATH, a runner's option variables); a required command counts only from `marker-writer run --snapshot`, or from a writer whose key is trusted (CI's, with --sign-key)"
        ))),
        Some(_) => Ok(()),
    }
}

/// Where the markers of a check live.
pub(crate) fn check_dir(project: &Project, check: &CheckName) -> PathBuf {
    project.markers().join(check.as_str())
}

/// Refuses a markers directory (or a check's directory, or a default `.vigil`) that is a
/// symlink: vigil makes them as plain directories, and a link could point a gate at files
/// outside the project.
pub(crate) fn refuse_symlinks(project: &Project, check: &CheckName) -> Result<()> {
    let default = project.default_state.then(|| project.state.clone());
    for dir in default
        .into_iter()
        .chain([project.markers(), check_dir(project, check)])
    {
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(Error::input(format!(
                "{} is a symlink; markers live only in a plain directory of the project",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// Writes a marker: the payload, then the empty gate file, each atomically and in that order,
/// so that a crash at any instant leaves the previous marker or the new one, never a gate
/// whose payload is unreadable.
pub(crate) fn write(project: &Project, payload: &Payload) -> Result<(PathBuf, PathBuf)> {
    let check = CheckName::parse(&payload.check)?;
    writable_dir(project, &check)?;
    let (payload_path, gate_path) = paths(project, &check, &payload.subject);
    let mut json = serde_json::to_vec_pretty(payload).expect("a payload serializes");
    json.push(b'\n');
    atomic::write_atomic(&payload_path, &json, 0o644)
        .map_err(|e| Error::io("write", &payload_path, &e))?;
    atomic::write_atomic(&gate_path, b"", 0o644).map_err(|e| Error::io("write", &gate_path, &e))?;
    Ok((payload_path, gate_path))
}

/// The check's directory in the protected state, made (0700) when missing and writable here:
/// inside the agent's sandbox the state home is read-only, and a protected writer refuses at
/// once, before it runs anything.
pub(crate) fn writable_dir(project: &Project, check: &CheckName) -> Result<PathBuf> {
    let dir = check_dir(project, check);
    refuse_symlinks(project, check)?;
    let made = files::make_private_dir(&dir);
    let writable = made.and_then(|()| files::can_write(&dir, false));
    if let Err(e) = writable {
        return Err(Error::Io(format!(
            "the protected state {} cannot be written here ({}): a protected writer runs outside the agent's sandbox (your own terminal, a git hook you run, CI); nothing was run",
            dir.display(),
            error::plain_io(&e)
        )));
    }
    refuse_symlinks(project, check)?;
    Ok(dir)
}

/// The payload and gate paths of a subject's marker.
pub(crate) fn paths(project: &Project, check: &CheckName, subject_id: &str) -> (PathBuf, PathBuf) {
    let dir = check_dir(project, check);
    let key = subject::key(subject_id);
    (
        dir.join(format!("{key}.json")),
        dir.join(format!("{key}.ok")),
    )
}

/// Verifies the markers of `check` for `subject_id`, the local one and those published as
/// notes: the first that holds passes (see `verify_from`).
pub(crate) fn verify(
    project: &Project,
    check: &CheckName,
    subject_id: &str,
    max_age: Duration,
    trust: &Trust,
    command: Option<&str>,
) -> std::result::Result<Payload, Denial> {
    verify_from(project, check, subject_id, max_age, trust, command).map(|(payload, _)| payload)
}

/// Verifies the local marker of `check` for `subject_id` (the gate file and payload exist, the
/// payload is well formed, names this check and subject, says `passed`, is younger than
/// `max_age` and not from the future, and is signed as `trust` asks), then each payload
/// published for it as a note, by the same rules: any one that holds passes, and says where it
/// was found. When none does, the first reason: the local marker's, unless it has none for this
/// content, then the first note's; `subject mismatch` when only other content has markers.
pub(crate) fn verify_from(
    project: &Project,
    check: &CheckName,
    subject_id: &str,
    max_age: Duration,
    trust: &Trust,
    command: Option<&str>,
) -> std::result::Result<(Payload, Source), Denial> {
    let local = verify_local(project, check, subject_id, max_age, trust)
        .and_then(|payload| bound(&payload, command, trust).map(|()| payload));
    let local = match local {
        Ok(payload) => return Ok((payload, Source::Local)),
        Err(denial) => denial,
    };
    let mut first_note = None;
    for note in notes::read(project, check, subject_id) {
        // A note is what anyone with push access wrote (SPEC §5): it counts only signed by a
        // pinned or trusted key, even where an unsigned local marker would.
        match note.and_then(|payload| {
            judge(&payload, check, subject_id, max_age, trust)?;
            bound(&payload, command, trust)?;
            if trust.keys.is_empty() {
                return Err(Denial::BadSignature(
                    "a note counts only when signed by a trusted key, and none is trusted here; pin CI's key with --verify-key or `marker-writer trust KEYFILE`".to_string(),
                ));
            }
            Ok(payload)
        }) {
            Ok(payload) => return Ok((payload, Source::Notes)),
            Err(denial) => {
                first_note.get_or_insert(denial);
            }
        }
    }
    match (local, first_note) {
        (Denial::Missing | Denial::SubjectMismatch(_), Some(note)) => Err(note),
        (Denial::Missing, None)
            if has_other_markers(&project.legacy_markers().join(check.as_str())) =>
        {
            Err(Denial::Moved(format!(
                "{} holds markers of an older vigil, which are no longer read (the agent can write there); a protected writer writes them in the protected state now",
                project.legacy_markers().join(check.as_str()).display()
            )))
        }
        (Denial::Missing, None) if notes::has_any(project, check) => {
            Err(Denial::SubjectMismatch(format!(
                "the markers of `{check}` published as notes are for other content; this content is {subject_id}"
            )))
        }
        (local, _) => Err(local),
    }
}

/// The local marker alone.
fn verify_local(
    project: &Project,
    check: &CheckName,
    subject_id: &str,
    max_age: Duration,
    trust: &Trust,
) -> std::result::Result<Payload, Denial> {
    if let Err(e) = refuse_symlinks(project, check) {
        return Err(Denial::Malformed(e.to_string()));
    }
    let (payload_path, gate_path) = paths(project, check, subject_id);
    match std::fs::symlink_metadata(&gate_path) {
        Ok(meta) if meta.is_file() && meta.len() == 0 => {}
        Ok(_) => {
            return Err(Denial::Malformed(
                "the gate file is not an empty regular file".to_string(),
            ));
        }
        Err(_) => {}
    }
    if std::fs::symlink_metadata(&gate_path).is_err() {
        return Err(if has_other_markers(&check_dir(project, check)) {
            Denial::SubjectMismatch(format!(
                "the markers of `{check}` are for other content; this content is {subject_id}"
            ))
        } else {
            Denial::Missing
        });
    }
    let payload = read_payload(&payload_path)?;
    judge(&payload, check, subject_id, max_age, trust)?;
    Ok(payload)
}

/// Whether a payload vouches for `subject_id` under `check`: signed as `trust` asks (first:
/// with a trusted key, nothing of it counts before its signature holds), of a schema vigil
/// reads, for this check and this content, `passed`, younger than `max_age` and not from the
/// future. The same for a local marker and a note.
pub(crate) fn judge(
    payload: &Payload,
    check: &CheckName,
    subject_id: &str,
    max_age: Duration,
    trust: &Trust,
) -> std::result::Result<(), Denial> {
    trust.check(payload).map_err(Denial::BadSignature)?;
    if !SCHEMAS.contains(&payload.schema.as_str()) {
        return Err(Denial::Malformed(format!(
            "schema is {:?}, not one of {SCHEMAS:?}",
            payload.schema
        )));
    }
    if payload.schema == SCHEMAS[0] && payload.origin.is_some() {
        return Err(Denial::Malformed(
            "a vigil.marker/v1 payload has no origin".into(),
        ));
    }
    if payload.check != check.as_str() {
        return Err(Denial::Malformed(format!(
            "the payload is for check {:?}, not {check:?}",
            payload.check
        )));
    }
    if payload.subject != subject_id {
        return Err(Denial::SubjectMismatch(format!(
            "the payload names {} but its file is for {subject_id}",
            payload.subject
        )));
    }
    if payload.status != Status::Passed {
        return Err(Denial::Status(payload.status));
    }
    let Some(created) = time::parse_rfc3339(&payload.created_at) else {
        return Err(Denial::Malformed(format!(
            "created_at {:?} is not an RFC 3339 time",
            payload.created_at
        )));
    };
    let age = time::now_secs() - created;
    if age < -CLOCK_SKEW.as_secs_f64() {
        return Err(Denial::Malformed(format!(
            "created_at {} is in the future",
            payload.created_at
        )));
    }
    if age > max_age.as_secs_f64() {
        return Err(Denial::Stale(format!(
            "written {} ago, older than {}",
            human_age(age),
            human_age(max_age.as_secs_f64())
        )));
    }
    Ok(())
}

/// Reads and parses a payload; every failure is `malformed`.
pub(crate) fn read_payload(path: &Path) -> std::result::Result<Payload, Denial> {
    let bytes = match files::open_state(path) {
        Ok(file) => files::read_capped(file, MAX_PAYLOAD, "the payload", path)
            .map_err(|e| Denial::Malformed(e.to_string()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Denial::Malformed(
                "the gate file has no payload beside it".into(),
            ));
        }
        Err(e) => {
            return Err(Denial::Malformed(format!(
                "cannot read the payload: {}",
                error::plain_io(&e)
            )));
        }
    };
    serde_json::from_slice(&bytes)
        .map_err(|e| Denial::Malformed(format!("the payload is not a valid marker: {e}")))
}

fn has_other_markers(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".ok"))
    })
}

/// The newest committed marker of a check (a payload with its gate), by `created_at`.
pub(crate) fn newest(project: &Project, check: &CheckName) -> Option<Payload> {
    let entries = std::fs::read_dir(check_dir(project, check)).ok()?;
    entries
        .flatten()
        .take(1000)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let key = name.strip_suffix(".ok")?;
            read_payload(&e.path().with_file_name(format!("{key}.json"))).ok()
        })
        .max_by(|a, b| a.created_at.cmp(&b.created_at))
}

fn human_age(secs: f64) -> String {
    let secs = secs.max(0.0) as u64;
    match secs {
        0..=119 => format!("{secs}s"),
        120..=7199 => format!("{}m", secs / 60),
        7200..=172_799 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_required_command_is_matched_by_its_shell_words() {
        let same = [
            ("cargo test --locked", "cargo test --locked"),
            ("cargo  test   --locked", "cargo test --locked"),
            ("cargo test '--locked'", "cargo test --locked"),
            ("sh -c 'cargo test --locked'", "cargo test --locked"),
            ("cargo test --locked", "sh -c \"cargo test --locked\""),
            ("pytest -k 'a b'", "pytest -k \"a b\""),
            (
                "sh -c 'cargo test --locked && cargo clippy'",
                "cargo test --locked && cargo clippy",
            ),
        ];
        for (recorded, wanted) in same {
            assert!(same_command(recorded, wanted), "{recorded} / {wanted}");
        }
        let other = [
            ("true", "cargo test --locked"),
            ("cargo test", "cargo test --locked"),
            ("cargo test --locked; true", "cargo test --locked"),
            ("pytest -k a b", "pytest -k 'a b'"),
            // Only sh -c is unwrapped: another shell may read the text otherwise.
            ("bash -c 'cargo test --locked'", "cargo test --locked"),
            ("sh -c 'cargo test --locked' extra", "cargo test --locked"),
            ("cargo test 'unclosed", "cargo test 'unclosed"),
            ("", ""),
            // Shell syntax is compared as text: a newline runs two commands, a quoted `&&` is
            // an argument, a quoted `$X` is not expanded.
            ("sh -c 'cargo\ntest --locked'", "cargo test --locked"),
            (
                "cargo test --locked '&&' cargo clippy",
                "sh -c 'cargo test --locked && cargo clippy'",
            ),
            ("echo '$HOME'", "echo $HOME"),
            ("ls '*'", "ls *"),
        ];
        for (recorded, wanted) in other {
            assert!(!same_command(recorded, wanted), "{recorded} / {wanted}");
        }
    }

    #[test]
    fn check_names() {
        for good in ["tests", "lint.strict", "a-b_c", &"x".repeat(64)] {
            assert!(CheckName::parse(good).is_ok(), "{good}");
        }
        for bad in ["", ".", "..", "a/b", "../x", "a b", &"x".repeat(65)] {
            assert!(CheckName::parse(bad).is_err(), "{bad}");
        }
    }
}
