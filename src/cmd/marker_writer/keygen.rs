//! `marker-writer keygen`: an Ed25519 key pair for signing markers, the secret one kept from the
//! agent, the public one to commit or trust.

use crate::cli::flags::print;
use crate::error::{Error, Result};
use crate::evidence::signing;
use crate::exit::Exit;

use super::Options;

/// Makes the pair in `--out DIR`, and says where each half went.
pub(super) fn keygen(options: Options) -> Result<u8> {
    let out = options
        .out
        .ok_or_else(|| Error::usage("`keygen` needs --out DIR"))?;
    let (secret, public) = signing::keygen(&out)?;
    print(
        format!(
            "marker-writer: secret key {} (keep it from the agent), public key {} (commit it, or trust it with `marker-writer trust`)\n",
            secret.display(),
            public.display()
        )
        .as_bytes(),
    )
    .map(Exit::code)
}
