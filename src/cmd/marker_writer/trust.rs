//! `marker-writer trust`: a public key trusted for this project's markers (or, `--global`,
//! every project's), recorded in the protected state outside the project.

use crate::cli::flags::print;
use crate::error::{Error, Result};
use crate::evidence::signing;
use crate::exit::Exit;
use crate::state::project::Project;

use super::Options;

/// Trusts the key in the file given, and says for what.
pub(super) fn trust(project: &Project, options: Options) -> Result<u8> {
    let file = options
        .key_file
        .ok_or_else(|| Error::usage("`trust` needs the public key file, e.g. vigil-marker.pub"))?;
    let (id, path) = signing::trust(project, &file, options.global)?;
    let scope = if options.global {
        "every project"
    } else {
        "this project"
    };
    print(
        format!(
            "marker-writer: key {id} is trusted for {scope}'s markers ({})\n",
            path.display()
        )
        .as_bytes(),
    )
    .map(Exit::code)
}
