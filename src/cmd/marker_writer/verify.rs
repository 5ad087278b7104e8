//! `marker-writer verify`: exit 0 only for a passed marker of exactly this content, young
//! enough, trusted, local or from notes (and, under the human's hold, made under it); else 1
//! with the one reason.

use crate::cli::flags::print;
use crate::cli::output::diagnostic;
use crate::error::Result;
use crate::evidence::held;
use crate::evidence::marker;
use crate::evidence::payload;
use crate::evidence::payload::CheckName;
use crate::evidence::signing;
use crate::exit::Exit;
use crate::state::project::Project;

use super::{NAME, Options};

/// Verifies the marker of `check` for the content `subject_id`: its exit code.
pub(super) fn verify(
    project: &Project,
    check: &CheckName,
    subject_id: &str,
    options: &Options,
) -> Result<u8> {
    let max_age = options.max_age.unwrap_or(payload::DEFAULT_MAX_AGE);
    let trust = signing::trusted_keys(project, options.verify_key.as_deref())?;
    let command = options.bound_to.as_deref();
    let verified = marker::verify_from(project, check, subject_id, max_age, &trust, command);
    // Under the human's hold, what the gate counts (SPEC §11): a run that held it.
    if let (Ok((payload, _)), Some(hold)) = (&verified, crate::state::hold::load(project)?)
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
