//! `marker-writer write`: a status recorded by hand (or by a CI job for a command it ran
//! itself, `--command`), signed when a key is given, and published with `--publish`.

use crate::cli::flags::print;
use crate::error::{Error, Result};
use crate::evidence::marker;
use crate::evidence::notes;
use crate::evidence::payload::CheckName;
use crate::evidence::signing;
use crate::evidence::signing::SignKey;
use crate::exit::Exit;
use crate::state::project::Project;

use super::{Options, payload, publish_deadline};

/// Writes the marker `--status` says for the content `subject_id`, and says where.
pub(super) fn write(
    project: &Project,
    check: &CheckName,
    subject_id: &str,
    options: Options,
    signer: Option<&SignKey>,
) -> Result<u8> {
    let status = options
        .status
        .ok_or_else(|| Error::usage("`write` needs --status passed|failed|blocked|aborted"))?;
    let mut payload = payload(check, status, subject_id, None, options.note);
    payload.command = options.bound_to;
    if let Some(key) = signer {
        signing::sign(key, &mut payload);
    }
    let (path, _) = marker::write(project, &payload)?;
    if options.publish {
        notes::publish(project, &payload, publish_deadline())?;
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
